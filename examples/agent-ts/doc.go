// Package agentts holds the test of the agent example in this directory: an agent on the
// OpenAI Agents SDK (@openai/agents), with a scripted model, calling the example bank's tools
// through mcpgate and attaching the user's words to every gated call (verdict-meta.mjs). The
// example itself is the Node scripts beside this file; README.md says how to run it.
package agentts
