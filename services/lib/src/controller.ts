/**
 * `@punk/lib/controller`: the part of the library a Kubernetes controller (the operator) uses — errors, logging,
 * configuration, the NATS bus and its contracts, the custom resources' schemas, bucket publishing of policies and
 * workflows, metric labels and the service runtime — without the database, tracing SDK, policy engine, workflow
 * runner and redaction modules the index also exports, so the operator's process does not load them.
 */
export * from './errors.js';
export * from './log.js';
export * from './config.js';
export * from './bus/bus.js';
export { NatsBus, type NatsBusOptions } from './bus/nats.js';
export * from './contracts.js';
export * from './spec/mcpserver.js';
export * from './server-idle.js';
export * from './spec/mcpcredential.js';
export * from './spec/credential-body.js';
export * from './spec/mcppolicy.js';
export * from './spec/mcpworkflow.js';
export * from './spec/workflow-graph.js';
export { policyEntryOf, publishPolicy, withdrawPolicy, type PolicyObject } from './policy/publish.js';
export { workflowEntryOf, publishWorkflow, withdrawWorkflow, type WorkflowEntryResult, type WorkflowObject } from './workflow/publish.js';
export { errorTypeOf, NO_ERROR, OTHER, secondsSince } from './metrics/labels.js';
export { runServiceMain, type ServiceDefinition, type ServiceContext, type StartedService } from './service/run.js';
