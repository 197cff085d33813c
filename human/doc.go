// Package human says how the daemon's state reads to a person: the lines
// of "startlux status", the load progress "startlux serve" and "startlux
// use" print, and byte counts. The command line and the menu-bar app share
// it, so that a status field reads one way wherever it is shown. It imports
// nothing of the module but api.
package human
