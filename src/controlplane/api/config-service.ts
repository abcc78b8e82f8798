import { NotFoundError, unselectedConfigWarnings } from '../../machineconfig/index.ts';
import type { ConfigServiceHandlers } from '../../runtime/generated/mcplane/v1/ConfigService.ts';
import type { Logger } from '../../runtime/logger.ts';
import type { ControlPlane } from '../control-plane.ts';
import { referencedConfigs } from '../cache/referenced-configs.ts';
import type { Authorizer } from './authorization.ts';
import { unary } from './status-errors.ts';
import { machineConfigToWire, nodeToWire, poolToWire, renderedToWire } from './to-wire.ts';

export function configService(cp: ControlPlane, auth: Authorizer, log: Logger): ConfigServiceHandlers {
  const admin = <Req, Res>(fn: (req: Req, who: string) => Res | Promise<Res>) => unary<Req, Res>(log, (req, call) => {
    auth.requireAdmin(call);
    return fn(req, auth.identify(call)?.commonName ?? 'local');
  });
  return {
    Apply: admin(async (req: { manifests: { source: string; text: string }[]; dryRun: boolean }) => ({
      objects: await cp.apply(req.manifests, req.dryRun),
      warnings: unselectedConfigWarnings(req.manifests, [...cp.cache.pools.values()].map((p) => p.value)),
      // Only valid documents get here (apply threw otherwise), so the preview can render them.
      ...(req.dryRun ? await cp.previewApply(req.manifests) : {}),
    })),
    Delete: admin(async (req: { kind: string; name: string }, who) => {
      await cp.delete(req.kind, req.name, who);
      return {};
    }),
    ListMachineConfigs: admin(() => ({
      machineConfigs: [...cp.cache.configs.values()].sort((a, b) => (a.name < b.name ? -1 : 1)).map(machineConfigToWire),
    })),
    GetMachineConfig: admin((req: { name: string }) => {
      const stored = cp.cache.configs.get(req.name);
      if (!stored) throw new NotFoundError('MachineConfig', req.name);
      return machineConfigToWire(stored);
    }),
    ListRenderedConfigs: admin((req: { pool: string }) => {
      const references = referencedConfigs(cp.cache);
      return {
        renderedConfigs: [...cp.cache.rendered.values()]
          .filter((r) => !req.pool || r.value.pool === req.pool)
          .sort((a, b) => a.value.pool.localeCompare(b.value.pool) || b.createdAt - a.createdAt)
          .map((r) => renderedToWire(r, references, false)),
      };
    }),
    GetRenderedConfig: admin((req: { name: string }) => {
      const stored = cp.cache.rendered.get(req.name);
      if (!stored) throw new NotFoundError('RenderedConfig', req.name);
      return renderedToWire(stored, referencedConfigs(cp.cache), true);
    }),
    SetPoolPaused: admin(async (req: { name: string; paused: boolean }) => {
      await cp.setPoolPaused(req.name, req.paused);
      return poolToWire(cp.cache.pools.get(req.name)!, cp.cache.poolStatuses.get(req.name)?.value.status);
    }),
    LabelNode: admin(async (req: { name: string; set: Record<string, string>; remove: string[] }, who) => {
      await cp.labelNode(req.name, req.set, req.remove, who);
      return nodeToWire(cp.cache.nodes.get(req.name)!);
    }),
    ReapplyNode: admin(async (req: { name: string }, who) => {
      await cp.reapplyNode(req.name, who);
      return {};
    }),
  };
}
