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
export { boundAdoptedContent, driftedConditionMessage, driftProposal, MAX_ADOPTED_FILE_BYTES, MAX_ADOPTED_FILES, MAX_ADOPTED_TOTAL_BYTES, proposalName } from './drift-adoption.ts';
export { driftIgnoreMatcher, driftIgnoreProblem, MAX_DRIFT_IGNORE_ENTRIES, parseDriftIgnore } from './drift-ignore.ts';
export { defaultPools, parseAssignedDisruptionPolicy, parseAssignedDriftPolicy, parseMachineConfigPool } from './machine-config-pool.ts';
export { resolveMaxUnavailable } from './max-unavailable.ts';
export { parseDocuments, parseManifests, readDocuments, type ParsedManifests, type RawDocument } from './manifest.ts';
export { MAX_APPLY_YAML_ANCHORS, MAX_APPLY_YAML_NODES, MAX_APPLY_YAML_TOKENS, YamlBudget } from './yaml-expansion.ts';
export { managedPathViolation, isUnder } from './paths.ts';
export { admitNodeLabels, configsForPool, kubeletMaySetLabel, labelProblem, isCustomPool, labelsForPool, NODE_RESTRICTION_PREFIX, NODE_ROLE_PREFIX, poolMembership, poolSelectionLabels, poolSelectsNode, primaryPoolForNode, selfReportableSelectorKeys, selfReportedSelectorWarnings } from './pool-membership.ts';
export { ProblemCollector } from './problem-collector.ts';
export { boundDetails, boundProblems, PROBLEMS_TRAILER_BUDGET, STATUS_DETAILS_BUDGET, type BoundedProblems } from './problem-budget.ts';
export { mergeSpecs, renderPool, renderedConfigJson, renderedConfigManifest, renderedConfigName } from './render.ts';
export { admitNodeStatus, agentVersionProblem, boundNodeStatus, MAX_AGENT_VERSION_CHARS, MAX_DRIFT_ENTRIES, MAX_NODE_LABELS, MAX_REASON_CHARS, registrationProblems } from './node-status-limits.ts';
export { escapeControlCharacters } from './control-characters.ts';
export { FAILED_NODE_STATES, isDegraded, isReady, isUpdated, unavailableReason } from './node-availability.ts';
export { isDnsSubdomain, MAX_NODE_NAME_CHARS, NODE_NAME_RULE, nodeNameProblem } from './node-name.ts';
export { computePoolStatus, conditionOf, DEFAULT_DRAIN_STALLED_AFTER_MS, formatDuration, type DrainInProgress, type PoolStatusInput } from './pool-status.ts';
export { decideRollout, type RolloutDecision, type RolloutSafetyInput } from './rollout.ts';
export { unselectedConfigs } from './unselected-configs.ts';
export { applyWarnings } from './apply-warnings.ts';
export { parseApplyRequest, type ApplyRequest } from './apply-request.ts';
export { appendToHistory, boundUpdateRecord, endPhase, enterPhase, finishUpdate, MAX_HISTORY_UPDATES, MAX_UPDATE_PHASES, startUpdate, typicalUpdate, withPhase, type TypicalUpdate, type UpdatePhase, type UpdateRecord, type UpdateResult } from './update-record.ts';
export { generatedFromImported, isRenderedConfigName, manifestFromClusterObject, RENDERED_PREFIX, SOURCE_RESOURCES, type ClusterKind } from './cluster-object.ts';
export { formatWait, formatWaitChangesIn, isKnownTimeZone, waitsForWindow, windowState, type WindowState } from './maintenance-window.ts';
export { budgetGroupOf } from './disruption-budget.ts';
export { isDisruptive, type RolloutContext } from './rollout.ts';
export { rolloutOrder } from './rollout-order.ts';
export { previewRollout, type NodeSchedule } from './rollout-preview.ts';
export { durationMs } from './duration.ts';
export { parseHealthCheck, parseRolloutPolicy } from './rollout-policy.ts';
export {
  DEFAULT_HOOK_TIMEOUT, describeHookAction, describeLifecycleHooks, hookApplies, hookChangedPaths, HOOK_POINTS, HOOKS_ANNOTATION, hookTimeoutMs, mergeLifecycleHooks,
  parseHooksAnnotation, parseLifecycleHooks, type HookAction, type HookPoint, type HookResult, type LifecycleHooks,
} from './lifecycle-hooks.ts';
export { describeTryCheck, effectiveTry, parseTryPolicy, tryTimeoutMs, tryTimeoutProblem, type TryCheck, type TryPolicy } from './try-policy.ts';
export { canaryCount, canaryGate, canaryNames, isCanary, type CanaryGate, type CanarySoak } from './canary.ts';
export { activeHalt, describeHalt, effectiveTarget, failedNodes, nextRolloutState, type FailedNode, type RolloutHalt, type RolloutState } from './rollout-failures.ts';
export { MCPLANE_POOL_FIELDS, POOL_SPEC_ANNOTATION } from './pool-spec-annotation.ts';
export { needsStaging, previewStaging, resolveMaxStaging, stagingEnabled, type StagingSchedule } from './staging.ts';
