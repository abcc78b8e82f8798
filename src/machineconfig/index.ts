// The pure domain core shared by the control plane, the agent and the CLI. No I/O happens in
// this folder: callers read files and sockets, and hand text and objects in.

export * from './constants.ts';
export * from './errors.ts';
export type * from './types.ts';
export { day1StorageChange, diffSpecs, isEmptyDiff, needsDrain, planDisruption, splitKernelArguments, updateActionOf, type ChangeDecision, type ChangeKind, type ConfigDiff, type DisruptionPlan, type PolicyEntryRef, type UpdateAction } from './config-diff.ts';
export { canonicalJson, sha256Hex } from './canonical-json.ts';
export { decodeDataUrl, encodeDataUrl, CANONICAL_DATA_URL_PREFIX } from './data-url.ts';
export { emptyIgnitionConfig, parseIgnition, toIgnitionV2 } from './ignition.ts';
export { formatSelector, isEmptySelector, matchesSelector } from './label-selector.ts';
export { parseMachineConfig } from './machine-config.ts';
export { parseMachineConfiguration } from './machine-configuration.ts';
export { mergeDisruptionPolicies, policyEntryOrigin } from './disruption-policy-merge.ts';
export { defaultPools, parseAssignedDisruptionPolicy, parseAssignedDriftPolicy, parseMachineConfigPool, resolveMaxUnavailable } from './machine-config-pool.ts';
export { parseDocuments, parseManifests, readDocuments, type ParsedManifests, type RawDocument } from './manifest.ts';
export { MAX_APPLY_YAML_ANCHORS, MAX_APPLY_YAML_NODES, MAX_APPLY_YAML_TOKENS, YamlBudget } from './yaml-expansion.ts';
export { managedPathViolation, isUnder } from './paths.ts';
export { admitNodeLabels, configsForPool, kubeletMaySetLabel, labelProblem, isCustomPool, labelsForPool, NODE_RESTRICTION_PREFIX, NODE_ROLE_PREFIX, poolMembership, poolSelectionLabels, poolSelectsNode, primaryPoolForNode, selfReportableSelectorKeys, selfReportedSelectorWarnings } from './pool-membership.ts';
export { ProblemCollector } from './problem-collector.ts';
export { boundDetails, boundProblems, PROBLEMS_TRAILER_BUDGET, STATUS_DETAILS_BUDGET, type BoundedProblems } from './problem-budget.ts';
export { mergeSpecs, renderPool, renderedConfigJson, renderedConfigManifest, renderedConfigName } from './render.ts';
export { agentVersionProblem, boundNodeStatus, MAX_AGENT_VERSION_CHARS, MAX_DRIFT_ENTRIES, MAX_NODE_LABELS, MAX_REASON_CHARS, registrationProblems } from './node-status-limits.ts';
export { escapeControlCharacters } from './control-characters.ts';
export { isDegraded, isReady, isUpdated, unavailableReason } from './node-availability.ts';
export { computePoolStatus, conditionOf, DEFAULT_DRAIN_STALLED_AFTER_MS, formatDuration, type DrainInProgress, type PoolStatusInput } from './pool-status.ts';
export { decideRollout, rolloutOrder, type RolloutDecision, type RolloutSafetyInput } from './rollout.ts';
export { unselectedConfigs, unselectedConfigWarnings } from './unselected-configs.ts';
export { appendToHistory, boundUpdateRecord, endPhase, enterPhase, finishUpdate, MAX_HISTORY_UPDATES, MAX_UPDATE_PHASES, startUpdate, typicalUpdate, withPhase, type TypicalUpdate, type UpdatePhase, type UpdateRecord, type UpdateResult } from './update-record.ts';
export { generatedFromImported, isRenderedConfigName, manifestFromClusterObject, RENDERED_PREFIX, SOURCE_RESOURCES, type ClusterKind } from './cluster-object.ts';
export { formatWait, formatWaitChangesIn, isKnownTimeZone, waitsForWindow, windowState, type MaintenanceWindow, type MaintenanceWindowScope, type WindowState } from './maintenance-window.ts';
export { budgetGroupOf, type DisruptionBudget } from './disruption-budget.ts';
export { isDisruptive, type RolloutContext } from './rollout.ts';
export { previewRollout, type NodeSchedule } from './rollout-preview.ts';
export { durationMs } from './duration.ts';
export { parseHealthCheck, parseRolloutPolicy } from './rollout-policy.ts';
export { canaryCount, canaryGate, canaryNames, isCanary, type CanaryGate, type CanarySoak } from './canary.ts';
export { activeHalt, describeHalt, effectiveTarget, failedNodes, nextRolloutState, type FailedNode, type RolloutHalt, type RolloutState } from './rollout-failures.ts';
export { MCPLANE_POOL_FIELDS, POOL_SPEC_ANNOTATION } from './pool-spec-annotation.ts';
