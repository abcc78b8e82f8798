#!/usr/bin/env node
// STAND-IN for a reboot: records the request in a marker file and exits 0, as logind's
// Reboot() returns before the machine goes down. The test harness sees the marker, kills the
// agent, gives the "machine" a new boot id, boots the staged rpm-ostree deployment and starts
// the agent again, which is what a real reboot amounts to for the agent.
import { appendFileSync } from 'node:fs';
appendFileSync(process.argv[2], `${Date.now()}\n`);
