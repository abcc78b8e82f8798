#!/usr/bin/env node
// `mcplane-server`: see launch.mjs for how it finds the program (source with tsx, or the esbuild bundle).
import { launch } from './launch.mjs';

await launch('mcplane-server', 'src/controlplane/main.ts');
