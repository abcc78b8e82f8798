#!/usr/bin/env node
// `mcplane-agent`: see launch.mjs for how it finds the program (source with tsx, or the esbuild bundle).
import { launch } from './launch.mjs';

await launch('mcplane-agent', 'src/agent/main.ts');
