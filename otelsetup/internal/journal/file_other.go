//go:build !linux

// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package journal

import "os"

// Open returns ErrUnsupported: the journal needs Linux.
func Open(dir string, opts ...Option) (*Journal, error) { return nil, ErrUnsupported }

const supported = false

const suffix = ".journal"

const openFlags = 0

func isTempName(string) bool { return false }

const lockExclusiveNB = 0

var errWouldBlock = ErrUnsupported

func lockDir(string, int) (*os.File, error) { return nil, ErrUnsupported }

func (j *Journal) msync() error      { return ErrUnsupported }
func unmap([]byte) error             { return ErrUnsupported }
func tryLock(*os.File) (bool, error) { return false, ErrUnsupported }
