import { NotFoundError, unselectedConfigWarnings } from '../../machineconfig/index.ts';
import type { ConfigServiceHandlers } from '../../runtime/generated/mcplane/v1/ConfigService.ts';
import type { Logger } from '../../runtime/logger.ts';
import type { ControlPlane } from '../control-plane.ts';
import type { Authorizer } from './authorization.ts';
import { unary } from './status-errors.ts';
import { machineConfigToWire, poolToWire, renderedToWire } from './to-wire.ts';

export function configService(cp: ControlPlane, auth: Authorizer, log: Logger): ConfigServiceHandlers {
  const admin = <Req, Res>(fn: (req: Req, who: string) => Res | Promise<Res>) => unary<Req, Res>(log, (req, call) => {
    auth.requireAdmin(call);
    return fn(req, auth.identify(call)?.commonName ?? 'local');
  });
  return {
    Apply: admin(async (req: { manifests: { source: string; text: string }[]; dryRun: boolean }) => {
      const objects = await cp.apply(req.manifests, req.dryRun);
      await cp.settle();
      return { objects, warnings: unselectedConfigWarnings(req.manifests, [...cp.state.pools.values()].map((p) => p.value.pool)) };
    }),
    Delete: admin(async (req: { kind: string; name: string }) => {
      await cp.delete(req.kind, req.name);
      await cp.settle();
      return {};
    }),
    ListMachineConfigs: admin(() => ({
      machineConfigs: [...cp.state.configs.values()].sort((a, b) => (a.name < b.name ? -1 : 1)).map(machineConfigToWire),
    })),
    GetMachineConfig: admin((req: { name: string }) => {
      const stored = cp.state.configs.get(req.name);
      if (!stored) throw new NotFoundError('MachineConfig', req.name);
      return machineConfigToWire(stored);
    }),
    ListRenderedConfigs: admin((req: { pool: string }) => {
      const references = cp.render.referencedConfigs();
      return {
        renderedConfigs: [...cp.state.rendered.values()]
          .filter((r) => !req.pool || r.value.pool === req.pool)
          .sort((a, b) => a.value.pool.localeCompare(b.value.pool) || b.createdAt - a.createdAt)
          .map((r) => renderedToWire(r, references, false)),
      };
    }),
    GetRenderedConfig: admin((req: { name: string }) => {
      const stored = cp.state.rendered.get(req.name);
      if (!stored) throw new NotFoundError('RenderedConfig', req.name);
      return renderedToWire(stored, cp.render.referencedConfigs(), true);
    }),
    SetPoolPaused: admin(async (req: { name: string; paused: boolean }) => {
      await cp.setPoolPaused(req.name, req.paused);
      await cp.settle();
      return poolToWire(cp.state.pools.get(req.name)!, cp.statuses.status(req.name));
    }),
    ReapplyNode: admin((req: { name: string }, who) => {
      cp.reapplyNode(req.name, who);
      return {};
    }),
  };
}
