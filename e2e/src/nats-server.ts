/**
 * A nats-server with JetStream of a test's own (lib's private test server: a port it picks itself, its store in a
 * temporary directory): tests that fix stream names or restart NATS never touch the shared server on 4222.
 */
export { startPrivateNats as startOwnNats, type PrivateNats as OwnNats } from '@punk/lib/testing/nats';
