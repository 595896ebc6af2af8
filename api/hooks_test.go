package api

// CheckExecutionNames is checkExecutionNames, for the tests of package api_test.
var CheckExecutionNames = checkExecutionNames

// ExecutionNames is executionNames, for the tests of package api_test.
var ExecutionNames = executionNames[:]
