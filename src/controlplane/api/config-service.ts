import { applyWarnings, NotFoundError, parseApplyRequest } from '../../machineconfig/index.ts';
import type { ConfigServiceHandlers } from '../../runtime/generated/mcplane/v1/ConfigService.ts';
import type { Logger } from '../../runtime/logger.ts';
import type { ApiReads, ConfigCommands } from './api-access.ts';
import { referencedConfigs } from '../cache/referenced-configs.ts';
import { generatedConfigsFor } from '../cache/generated-config-plan.ts';
import { InvalidDocumentError } from '../../machineconfig/index.ts';
import { isSourceKind, SOURCE_KINDS } from '../../machineconfig/generated-configs.ts';
import { KIND_PINNED_IMAGE_SET, missingPinnedImageSetWarnings } from '../../machineconfig/pinned-image-set.ts';
import type { Authorizer } from './authorization.ts';
import { unary } from './status-errors.ts';
import { machineConfigToWire, nodeToWire, poolToWire, renderedToWire } from './to-wire.ts';

export function configService({ cache }: ApiReads, commands: ConfigCommands, auth: Authorizer, log: Logger): ConfigServiceHandlers {
  // Who may call what is checked before a handler runs (access-rules.ts, guarded-service.ts).
  const handle = <Req, Res>(fn: (req: Req, who: string) => Res | Promise<Res>) => unary<Req, Res>(log, (req, call) => fn(req, auth.identify(call)?.commonName ?? 'local'));
  return {
    Apply: handle(async (req: { manifests: { source: string; text: string }[]; dryRun: boolean; try?: string }, who) => {
      // Read once: what is stored, warned of and previewed are the same objects.
      const request = parseApplyRequest(req.manifests);
      const { objects, preview, warnings: tryWarnings } = await commands.apply(request, req.dryRun, req.try ? { timeout: req.try, requestedBy: who } : undefined);
      const sets = new Set([...cache.sourcesOf('PinnedImageSet').keys(), ...request.sources.filter((o) => o.kind === KIND_PINNED_IMAGE_SET).map((o) => o.metadata.name)]);
      const warnings = [...tryWarnings, ...applyWarnings(request, [...cache.pools.values()].map((p) => p.value)), ...missingPinnedImageSetWarnings(request.pools, sets)];
      return { objects, warnings, ...preview };
    }),
    Delete: handle(async (req: { kind: string; name: string }, who) => {
      await commands.delete(req.kind, req.name, who);
      return {};
    }),
    ListMachineConfigs: handle(() => ({
      machineConfigs: [...cache.configs.values()].sort((a, b) => (a.name < b.name ? -1 : 1)).map(machineConfigToWire),
    })),
    GetMachineConfig: handle((req: { name: string }) => {
      const stored = cache.configs.get(req.name);
      if (!stored) throw new NotFoundError('MachineConfig', req.name);
      return machineConfigToWire(stored);
    }),
    ListRenderedConfigs: handle((req: { pool: string }) => {
      const references = referencedConfigs(cache);
      return {
        renderedConfigs: [...cache.rendered.values()]
          .filter((r) => !req.pool || r.value.pool === req.pool)
          .sort((a, b) => a.value.pool.localeCompare(b.value.pool) || b.createdAt - a.createdAt)
          .map((r) => renderedToWire(r, references)),
      };
    }),
    GetRenderedConfig: handle((req: { name: string }) => {
      const stored = cache.rendered.get(req.name);
      if (!stored) throw new NotFoundError('RenderedConfig', req.name);
      return renderedToWire(stored, referencedConfigs(cache), cache.renderedConfig(req.name)!.specJson);
    }),
    SetPoolPaused: handle(async (req: { name: string; paused: boolean }) => {
      await commands.setPoolPaused(req.name, req.paused);
      return poolToWire(cache.pools.get(req.name)!, cache.poolStatuses.get(req.name)?.value.status);
    }),
    LabelNode: handle(async (req: { name: string; set: Record<string, string>; remove: string[] }, who) => {
      await commands.labelNode(req.name, req.set, req.remove, who);
      return nodeToWire(cache.nodes.get(req.name)!);
    }),
    ListSourceObjects: handle((req: { kind: string }) => {
      if (!isSourceKind(req.kind)) {
        throw new InvalidDocumentError([{ object: 'request', field: 'kind', rule: 'unknown-kind', message: `kind ${JSON.stringify(req.kind)} is not one of ${SOURCE_KINDS.join(', ')}` }]);
      }
      // Statuses are a pure function of the cache (the generator's), computed when read.
      const statuses = new Map(generatedConfigsFor(cache).statuses.map((s) => [s.object, s]));
      // A PinnedImageSet generates nothing; its status is the pools that name it.
      const poolsNaming = (set: string): string[] => [...cache.pools.values()].filter((p) => p.value.spec.pinnedImageSets?.some((r) => r.name === set)).map((p) => p.name).sort();
      return {
        objects: [...cache.sourcesOf(req.kind).values()].sort((a, b) => (a.name < b.name ? -1 : 1)).map((o) => {
          if (req.kind === KIND_PINNED_IMAGE_SET) {
            return { kind: req.kind, name: o.name, manifestJson: JSON.stringify(o.value), resourceVersion: o.resourceVersion, creationTimeUnixMs: o.createdAt, statusJson: JSON.stringify({ pools: poolsNaming(o.name) }) };
          }
          const s = statuses.get(`${req.kind}/${o.name}`);
          return {
            kind: req.kind, name: o.name, manifestJson: JSON.stringify(o.value), resourceVersion: o.resourceVersion, creationTimeUnixMs: o.createdAt,
            statusJson: JSON.stringify({ conditions: s?.conditions ?? [], generated: s?.generated ?? [], problems: s?.problems ?? [] }),
          };
        }),
      };
    }),
    GetMachineConfiguration: handle((req: { name: string }) => {
      if (req.name !== 'cluster') throw new NotFoundError('MachineConfiguration', req.name);
      const stored = cache.machineConfiguration;
      return { manifestJson: stored ? JSON.stringify(stored.value) : '', resourceVersion: stored?.resourceVersion ?? '' };
    }),
    ReapplyNode: handle(async (req: { name: string }, who) => {
      await commands.reapplyNode(req.name, who);
      return {};
    }),
    ConfirmTry: handle(async (req: { kind: string; name: string }, who) => ({ confirmed: await commands.confirmTry(req.kind, req.name, who) })),
  };
}
