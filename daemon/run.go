package daemon

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/startlux/startlux/ipc"
)

// RunOptions configures [Run].
type RunOptions struct {
	// Socket is the socket path (default ipc.DefaultSocketPath()).
	Socket string
	// Daemon configures the service.
	Daemon Options
	// Server tunes the protocol server.
	Server ipc.ServerOptions
	// Listening, if set, is called once the socket accepts connections.
	Listening func(path string)
	// ShutdownTimeout bounds the graceful shutdown (default 30s).
	ShutdownTimeout time.Duration
}

// Run serves the daemon on its socket until ctx ends (the command ties ctx
// to SIGTERM and SIGINT), then shuts down gracefully: it stops accepting,
// answers the requests in flight, closes the model and removes the socket.
// The socket accepts connections at once; the model loads meanwhile.
func Run(ctx context.Context, opts RunOptions) error {
	path := opts.Socket
	if path == "" {
		path = ipc.DefaultSocketPath()
	}
	if opts.ShutdownTimeout <= 0 {
		opts.ShutdownTimeout = 30 * time.Second
	}
	l, err := ipc.Listen(path)
	if err != nil {
		return err
	}
	defer l.Close()
	if opts.Server.Logger == nil {
		opts.Server.Logger = opts.Daemon.Logger
	}
	d := New(opts.Daemon)
	d.Start()
	srv := ipc.NewServer(d, opts.Server)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	if opts.Listening != nil {
		opts.Listening(l.Path())
	}

	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-served:
		served <- nil
	}
	sctx, cancel := context.WithTimeout(context.Background(), opts.ShutdownTimeout)
	defer cancel()
	errs := []error{serveErr}
	errs = append(errs, srv.Shutdown(sctx))
	<-served
	errs = append(errs, d.Close(sctx))
	if err := l.Close(); err != nil {
		errs = append(errs, fmt.Errorf("close socket: %w", err))
	}
	return errors.Join(errs...)
}
