// Package workspace holds one test: it runs the tests of the repository's
// other modules (go.work), so that `go test ./...` from the repository root
// keeps running every unit tier now that the reference deployment is a
// module of its own. It has no code.
package workspace
