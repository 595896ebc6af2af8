// Package complexity holds the module's bound on the cyclomatic complexity of its functions:
// every function and method outside the tests at most [Max], counted as gocyclo counts (one,
// plus one for each if, for, case, && and ||). Its test analyzes every non-test Go file of the
// module and fails naming each function over the bound, except the few that transcribe a
// published rule table one rule to a branch, where splitting would hide the table
// (docs/development.md).
package complexity

// Max is the most cyclomatic complexity a function of the module may have.
const Max = 30
