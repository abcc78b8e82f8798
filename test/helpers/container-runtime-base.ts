// The container-runtime base an OpenShift cluster's pools carry (`01-<pool>-container-runtime`,
// which `mcctl import` brings along): registries.conf and policy.json, from which the registries
// sources generate, and on worker a CRI-O stand-in unit whose reloads a test can count.

import { fileEntry, ign, mcDoc, type Doc } from './manifests.ts';

export const BASE_REGISTRIES_CONF = 'unqualified-search-registries = ["registry.access.redhat.com", "docker.io"]\n';
export const BASE_POLICY_JSON = '{"default":[{"type":"insecureAcceptAnything"}],"transports":{"docker-daemon":{"":[{"type":"insecureAcceptAnything"}]}}}';

/** CRI-O as the image ships it, in the sandbox: each reload appends a line to `countFile`. */
export const crioStandInUnit = (countFile: string): string =>
  `[Unit]\nDescription=CRI-O stand-in\n[Service]\nExecStart=/bin/sleep infinity\nExecReload=/bin/sh -c "echo reload >> ${countFile}"\n[Install]\nWantedBy=default.target\n`;

/**
 * Both pools' base files (the registries sources generate for master and worker alike, MCO's
 * syncImageConfig), with worker's CRI-O stand-in counting its reloads in `crioReloadsFile`.
 */
export function containerRuntimeBase(crioReloadsFile: string): Doc[] {
  const files = [fileEntry('/etc/containers/registries.conf', BASE_REGISTRIES_CONF), fileEntry('/etc/containers/policy.json', BASE_POLICY_JSON)];
  return [
    mcDoc('01-worker-container-runtime', 'worker', {
      config: ign('3.4.0', { storage: { files }, systemd: { units: [{ name: 'crio.service', enabled: true, contents: crioStandInUnit(crioReloadsFile) }] } }),
    }),
    mcDoc('01-master-container-runtime', 'master', { config: ign('3.4.0', { storage: { files } }) }),
  ];
}
