package otelomni

import (
	"context"
	"errors"
	"fmt"

	"github.com/otelomni/otelomni/attrs"
)

// Errors to end a request with, so that its span carries the matching
// error.type. Wrap them to add detail: errors.Is is used to recognise them.
var (
	// ErrClientAbort: the client aborted the request, possibly before it was
	// admitted (then it has no queue wait).
	ErrClientAbort = errors.New("client aborted the request")
	// ErrClientDisconnect: the client went away while the request ran.
	ErrClientDisconnect = errors.New("client disconnected")
	// ErrStageError: a pipeline stage failed the request.
	ErrStageError = errors.New("stage failed the request")
	// ErrTimeout: the request ran out of time.
	ErrTimeout = errors.New("request timed out")
)

// ErrRequestEnded is returned when a record is handed to a request that has
// already ended: its spans would hang under a closed parent.
var ErrRequestEnded = errors.New("otelomni: the request has already ended")

// ErrInvalidPhase is returned for a phase that is not in the catalogue.
var ErrInvalidPhase = errors.New("otelomni: invalid phase")

// errorType returns the value of error.type for err: one of the values that
// attrs defines, or the error's own Go type.
func errorType(err error) string {
	switch {
	case errors.Is(err, ErrClientAbort):
		return attrs.ErrorClientAbort
	case errors.Is(err, ErrClientDisconnect), errors.Is(err, context.Canceled):
		return attrs.ErrorClientDisconnect
	case errors.Is(err, ErrStageError):
		return attrs.ErrorStageError
	case errors.Is(err, ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		return attrs.ErrorTimeout
	}
	t := fmt.Sprintf("%T", err)
	switch t {
	case "*errors.errorString", "*fmt.wrapError", "*fmt.wrapErrors", "*errors.joinError":
		// The types of errors.New and fmt.Errorf say nothing about the
		// failure; the convention's fallback value is better.
		return "_OTHER"
	}
	return t
}
