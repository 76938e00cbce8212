package main

// The test switches' names as a test build of the relay reads them
// (testswitch_relaytest.go, -tags relaytest, as the tests build relayBin).
// The tests name them here so that they compile in either build; should
// these drift from the test build's, TestReleaseBuildHasNoTestSwitches
// fails (its control shows the test build honouring them).
const (
	envAgentShim  = "RELAY_TEST_AGENT_SHIM"
	envUnhardened = "RELAY_TEST_UNHARDENED"
	envIdleStep   = "RELAY_TEST_IDLE_STEP"
	// envSandboxWritable: files and directories bound writable into every
	// agent's sandbox (the scripted agents' logs).
	envSandboxWritable = "RELAY_TEST_SANDBOX_WRITABLE"
)
