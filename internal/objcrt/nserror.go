package objcrt

import "fmt"

// NSError is what an NSError says: its domain, code and localized
// description. It is plain data, so code that classifies errors can be
// tested on any system.
type NSError struct {
	Domain string
	Code   int
	Text   string
}

// Error returns the localized description with the domain and code.
func (e *NSError) Error() string {
	return fmt.Sprintf("%s (%s %d)", e.Text, e.Domain, e.Code)
}
