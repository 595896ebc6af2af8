// Package layers holds, in its test, the rules of the module's package graph that keep its trust
// boundaries: the executor, across the boundary from verdictd, holds public keys and runs verdicts
// but never reaches the code that decides or signs them; the gateway and the console reach the
// daemons only through their HTTP APIs; the wire types stand on the standard library alone. A
// change that breaks one fails TestTrustBoundaries, naming the import path that crosses it.
// docs/development.md draws the layers.
package layers
