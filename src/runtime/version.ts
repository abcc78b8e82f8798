// Replaced at bundle time by esbuild's define; read from package.json when run from source.
declare const __MCPLANE_VERSION__: string | undefined;
export const VERSION: string = typeof __MCPLANE_VERSION__ === 'string' ? __MCPLANE_VERSION__ : '0.1.0-dev';
