export { workflowEntryOf, publishWorkflow, withdrawWorkflow, type WorkflowEntryResult, type WorkflowObject } from './publish.js';
export { watchWorkflows, type TenantWorkflows } from './watch.js';
