// The public surface of the bridge.
export {};
