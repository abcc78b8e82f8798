// grpc-js passes an IP address as the TLS servername when a server is addressed by IP, and
// Node warns about it (DEP0123) on every connection. Certificates here carry IP SANs on
// purpose, so that one warning is noise to operators; every other warning still prints.

let installed = false;

export function silenceIpServernameWarning(): void {
  if (installed) return;
  installed = true;
  const listeners = process.listeners('warning');
  process.removeAllListeners('warning');
  process.on('warning', (warning: Error & { code?: string }) => {
    if (warning.code === 'DEP0123') return;
    if (listeners.length) for (const l of listeners) l(warning);
    else process.stderr.write(`${warning.name}: ${warning.message}\n`);
  });
}
