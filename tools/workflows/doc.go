// Package workflows holds no code: its test checks the CI workflows in
// .github/workflows against the repository (that they parse, and that
// their steps name build.sh targets that exist), since a workflow that
// runs only on a macOS runner is otherwise first read when it fails there.
package workflows
