// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelomni

import (
	"context"
	"errors"
	"fmt"
	"math"

	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"

	"github.com/otelomni/otelomni/attrs"
)

// classified is an error with its own error.type, by the OpenTelemetry
// convention of an ErrorType() string method.
type classified struct{ msg, typ string }

func (e *classified) Error() string     { return e.msg }
func (e *classified) ErrorType() string { return e.typ }

// Errors to end a request with, so that its span carries the matching
// error.type. Wrap them to add detail (fmt.Errorf with %w): errors.Is
// recognises them, and their ErrorType method names the type.
var (
	// ErrClientAbort: the client aborted the request, possibly before it was
	// admitted (then it has no queue wait). error.type "client_abort".
	ErrClientAbort error = &classified{"client aborted the request", attrs.ErrorClientAbort}
	// ErrClientDisconnect: the client went away while the request ran.
	// error.type "client_disconnect"; context.Canceled is read the same way.
	ErrClientDisconnect error = &classified{"client disconnected", attrs.ErrorClientDisconnect}
	// ErrStageError: a pipeline stage failed the request. error.type
	// "stage_error".
	ErrStageError error = &classified{"stage failed the request", attrs.ErrorStageError}
	// ErrTimeout: the request ran out of time. error.type "timeout";
	// context.DeadlineExceeded is read the same way.
	ErrTimeout error = &classified{"request timed out", attrs.ErrorTimeout}
)

// Errors that otelomni returns for calls it refused.
var (
	// ErrRequestEnded is returned when a measurement is handed to a request
	// (or stage) that has already ended: its spans would hang under a
	// closed parent. A call on a batch that has already ended
	// ([Batch.Record], [Batch.EndAt]) returns an error that matches it too
	// (errors.Is).
	ErrRequestEnded = errors.New("otelomni: the request has already ended")
	// ErrInvalidPhase is returned for a phase that is not in the
	// catalogue, or that this call cannot take (a denoise step or a
	// transfer part where a plain phase is expected), and for an output
	// index out of its range (0 to 2^31-1).
	ErrInvalidPhase = errors.New("otelomni: invalid phase for this call")
)

// maxErrorTypeBytes bounds error.type: it may come from an ErrorType
// method, and is a metric attribute.
const maxErrorTypeBytes = 128

// errorType returns the value of error.type for err, by the OpenTelemetry
// convention: the value of an ErrorType() string method found along err's
// chain; context.Canceled and context.DeadlineExceeded as client_disconnect
// and timeout; otherwise the Go type of err after unwrapping fmt.Errorf's
// wrappers. The types of errors.New and errors.Join say nothing of the
// failure, so they read as "_OTHER".
func errorType(err error) string {
	var et interface{ ErrorType() string }
	if errors.As(err, &et) {
		if v := et.ErrorType(); v != "" {
			return v
		}
	}
	switch {
	case errors.Is(err, context.Canceled):
		return attrs.ErrorClientDisconnect
	case errors.Is(err, context.DeadlineExceeded):
		return attrs.ErrorTimeout
	}
	v := semconv.ErrorType(err).Value.AsString()
	switch v {
	case "*errors.errorString", "*errors.joinError", "*fmt.wrapError", "*fmt.wrapErrors":
		return otherValue
	}
	return v
}

// errBatchEnded is returned for a call on a batch that has already ended.
var errBatchEnded error = endedError("otelomni: the batch has already ended")

// endedError is an error about a scope that has ended: it matches
// ErrRequestEnded.
type endedError string

func (e endedError) Error() string        { return string(e) }
func (e endedError) Is(target error) bool { return target == ErrRequestEnded }

// maxIndex bounds the output and step indices and the stage ids handed to
// otelomni: 0 to 2^31-1.
const maxIndex = math.MaxInt32

// rangeError reports an int handed to otelomni out of its documented
// range, which was not recorded.
type rangeError struct {
	what     string
	v        int64
	min, max int64
	// result says what became of it.
	result string
	// is is the error it matches, if any.
	is error
}

func (e *rangeError) Error() string {
	return fmt.Sprintf("otelomni: %s %d is out of range (%d to %d); %s", e.what, e.v, e.min, e.max, e.result)
}

func (e *rangeError) Is(target error) bool { return e.is != nil && target == e.is }

// outOfRange counts an int out of its range (Stats.Misuse) and returns
// the error that says so.
func (in *Instrumenter) outOfRange(what string, v, min, max int64, result string, is error) error {
	err := &rangeError{what: what, v: v, min: min, max: max, result: result, is: is}
	in.stats.misused(err.Error())
	return err
}

// badIndex reports whether i is not a valid output or step index.
func badIndex(i int) bool { return i < 0 || i > maxIndex }

// errorType returns err's error.type, bounded.
func (in *Instrumenter) errorType(err error) string {
	return in.strMax(errorType(err), maxErrorTypeBytes)
}
