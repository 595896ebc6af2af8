//go:build tools

// Package deps pins the project's chosen dependencies in go.mod until every one is imported by
// real code. It is never built.
package deps

import (
	_ "github.com/go-jose/go-jose/v4"
	_ "github.com/google/cel-go/cel"
	_ "github.com/gowebpki/jcs"
	_ "github.com/modelcontextprotocol/go-sdk/mcp"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/santhosh-tekuri/jsonschema/v6"
	_ "go.etcd.io/bbolt"
	_ "go.etcd.io/etcd/client/v3"
	_ "golang.org/x/text/unicode/norm"
	_ "pgregory.net/rapid"
	_ "sigs.k8s.io/yaml"
)
