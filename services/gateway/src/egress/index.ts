/** The SSRF guard for http upstreams: URL shape, destination policy, and a guarded `fetch`. */
export { checkUrlShape, redactUrl } from './url-shape.js';
export {
  checkDestination,
  destinationPolicyOf,
  type CheckedDestination,
  type DestinationPolicy,
  type HostLookup,
  type ResolvedAddress,
} from './destination.js';
export { guardedFetch, type GuardedFetch, type GuardedFetchOptions } from './guarded-fetch.js';
