#!/usr/bin/env node
// `mcctl`: see launch.mjs for how it finds the program (source with tsx, or the esbuild bundle).
import { launch } from './launch.mjs';

await launch('mcctl', 'src/cli/main.ts');
