// The public surface of the operator.
export {};
