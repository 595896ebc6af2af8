package main

import (
	"os"
	"testing"
)

// TestDemo runs the README's first command end to end: three real processes, a question, an
// answer, a verdict, an execution, a refused injection and replay, and two clean audits.
func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the whole stack")
	}
	// The demo runs from the repository root, as the README says.
	wd, _ := os.Getwd()
	if err := os.Chdir("../.."); err != nil {
		t.Fatal(err)
	}
	defer os.Chdir(wd)
	d, err := newDemo(false)
	if err != nil {
		t.Fatal(err)
	}
	err = d.run()
	d.stop()
	if err != nil {
		t.Fatal(err)
	}
}

// TestDemoGateway runs the demo's gateway mode end to end: the transfer through mcpgate from a
// go-sdk host that sends the user's words in _meta, the user's answers by elicitation, one
// execution, and an injected account number that is asked about and never runs.
func TestDemoGateway(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the whole stack")
	}
	wd, _ := os.Getwd()
	if err := os.Chdir("../.."); err != nil {
		t.Fatal(err)
	}
	defer os.Chdir(wd)
	d, err := newDemo(false)
	if err != nil {
		t.Fatal(err)
	}
	d.gateway = true
	err = d.run()
	d.stop()
	if err != nil {
		t.Fatal(err)
	}
}
