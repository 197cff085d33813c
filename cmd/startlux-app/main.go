// Command startlux-app is StartLux's menu-bar app (Contents/MacOS/StartLux in
// the bundle): it keeps the daemon running and shows what it is doing.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "startlux-app: not yet wired")
	os.Exit(1)
}
