// The control plane's way to the Kubernetes API: the shared module in src/runtime (mcctl import
// uses it too), so @kubernetes/client-node stays behind one module.

export * from '../../runtime/kube-client.ts';
