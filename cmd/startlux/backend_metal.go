package main

import (
	"errors"

	"github.com/startlux/startlux/tensor"
)

// openMetal opens the Metal backend. TODO: replaced when the metal package lands.
func openMetal() (tensor.Backend, error) {
	return nil, errors.New("the Metal backend is not built yet")
}
