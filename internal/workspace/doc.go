// Package workspace holds the repository-wide checks that read more than one
// package as source: the library's go.mod stays lean, one name per concept
// across the packages' exported API, and rules two building blocks must
// agree on without importing each other. It has no code.
//
// It used to run the other modules' tests inside one test, so that
// `go test ./...` at the root covered them too. Nested in one test binary
// their times added up under one `go test` timeout, and on a busy laptop
// the command timed out. Each module is now tested by its own command (see
// the README's "Tests").
package workspace
