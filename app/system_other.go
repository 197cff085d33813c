//go:build !darwin

package app

// NewSystem returns the [XDGSystem] of this user.
func NewSystem(daemonArgs []string) (System, error) {
	return NewXDGSystem(daemonArgs)
}
