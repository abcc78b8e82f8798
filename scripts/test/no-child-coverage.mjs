// Loaded with --import into the test runner and (the runner passes its --import flags on) into
// every test file's process. Coverage is collected in the test files' processes only: each
// mcctl, mcplane-server and agent process a test spawns would otherwise write its own V8
// coverage too, which doubles its start-up CPU (measured: 2.2 s to 4.4 s for one mcctl call) and
// leaves some 10 MB per process for the report to read. A test file's process is told apart from
// the runner by NODE_TEST_CONTEXT, which the runner sets for the files' processes only; its own
// coverage is unaffected (node reads NODE_V8_COVERAGE once at start-up).
if (process.env.NODE_TEST_CONTEXT) delete process.env.NODE_V8_COVERAGE;
