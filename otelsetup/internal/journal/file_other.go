//go:build !linux

// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package journal

import "os"

// Open returns ErrUnsupported: the journal needs Linux.
func Open(dir string, opts ...Option) (*Journal, error) { return nil, ErrUnsupported }

const supported = false

const suffix = ".journal"

func (j *Journal) msync() error      { return ErrUnsupported }
func unmap([]byte) error             { return ErrUnsupported }
func tryLock(*os.File) (bool, error) { return false, ErrUnsupported }
