// Command otlp-receiver is a real OpenTelemetry trace receiver for Flint's
// tests and benchmarks: the OpenTelemetry Collector's own OTLP receiver
// (go.opentelemetry.io/collector/receiver/otlpreceiver), taking OTLP over
// HTTP (protobuf or JSON, as the collector does) and writing every trace
// export it accepts as one line of the collector's ptrace JSON. Nothing of
// Flint is in it: what it accepts, a collector accepts.
//
//	otlp-receiver -endpoint 127.0.0.1:4318 -out spans.jsonl
//
// It prints `otlp-receiver listening on http://<endpoint>` on standard error
// once the receiver is serving, and stops on SIGINT or SIGTERM.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/receiver/receivertest"
)

func main() {
	endpoint := flag.String("endpoint", "127.0.0.1:4318", "host:port the OTLP/HTTP receiver listens on")
	out := flag.String("out", "-", "file the traces are appended to as ptrace JSON lines; - for standard output")
	flag.Parse()
	if err := run(*endpoint, *out); err != nil {
		fmt.Fprintf(os.Stderr, "otlp-receiver: %v\n", err)
		os.Exit(1)
	}
}

func run(endpoint, out string) error {
	var w *bufio.Writer
	if out == "-" {
		w = bufio.NewWriter(os.Stdout)
	} else {
		f, err := os.OpenFile(out, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return err
		}
		defer f.Close()
		w = bufio.NewWriter(f)
	}
	var mu sync.Mutex
	marshaler := &ptrace.JSONMarshaler{}
	// Each export is one line, written whole and flushed before the receiver
	// answers, so a reader that saw the 200 finds the line.
	traces, err := consumer.NewTraces(func(_ context.Context, td ptrace.Traces) error {
		line, err := marshaler.MarshalTraces(td)
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		if _, err := w.Write(append(line, '\n')); err != nil {
			return err
		}
		return w.Flush()
	})
	if err != nil {
		return err
	}

	factory := otlpreceiver.NewFactory()
	cfg := factory.CreateDefaultConfig()
	// The collector's own configuration path: only the HTTP protocol, on the given endpoint.
	conf := confmap.NewFromStringMap(map[string]any{
		"protocols": map[string]any{"http": map[string]any{"endpoint": endpoint}},
	})
	if err := conf.Unmarshal(cfg); err != nil {
		return fmt.Errorf("configuring the receiver: %w", err)
	}
	ctx := context.Background()
	rcv, err := factory.CreateTraces(ctx, receivertest.NewNopSettings(component.MustNewType("otlp")), cfg, traces)
	if err != nil {
		return fmt.Errorf("creating the receiver: %w", err)
	}
	if err := rcv.Start(ctx, componenttest.NewNopHost()); err != nil {
		return fmt.Errorf("starting the receiver: %w", err)
	}
	fmt.Fprintf(os.Stderr, "otlp-receiver listening on http://%s\n", endpoint)

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
	if err := rcv.Shutdown(ctx); err != nil {
		return fmt.Errorf("stopping the receiver: %w", err)
	}
	mu.Lock()
	defer mu.Unlock()
	return w.Flush()
}
