// Package xlacanon turns an XLA compile signature (StableHLO/MLIR or HLO
// module text plus platform, versions, flags, compile options and topology)
// into canonical bytes, so that every equivalent compile maps to one cache key
// while anything that changes the executable keeps keys apart.
//
// The package depends on the standard library only: it is compiled natively
// (for tests, benchmarks and the `cachesvc key` path) and to wasip1 as the
// built-in `xla` plugin. The signature schema and every canonicalization rule
// are documented in ../SCHEMA.md.
//
// The module scanners are single-pass and linear in the input: they copy runs
// of unchanged bytes in bulk and stop only at bytes that may start something
// to rewrite (whitespace, quotes, comments, locations, SSA names, metadata).
// Strings are never altered: whitespace and escapes inside them are
// significant.
package xlacanon
