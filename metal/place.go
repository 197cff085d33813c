package metal

import "fmt"

// This file decides where a driver puts weight bytes: inside a region
// wrapped once without a copy (a whole mmap'd checkpoint file), or copied
// into a buffer of their own. The decisions are pure functions of the
// addresses and the device's limits, so they are tested on any machine;
// both the GPU binding and the emulator (when given limits) follow them.

// deviceLimits are what a device allows of buffers.
type deviceLimits struct {
	// pageSize is the VM page size: a buffer made without a copy
	// (newBufferWithBytesNoCopy) starts on a page and spans whole pages.
	pageSize int
	// maxBuffer is the largest buffer in bytes (MTLDevice maxBufferLength).
	maxBuffer int
}

// span is a range of addresses [start, end).
type span struct{ start, end uintptr }

// regionPlan is the decision about wrapping one region without a copy.
type regionPlan struct {
	// size is the length of the buffer: the region rounded up to whole
	// pages (an mmap'd file's last page is mapped whole).
	size int
	// reason says why the region is not wrapped ("" when it is).
	reason string
}

// planRegion decides whether n bytes at start can be one no-copy buffer.
// The caller vouches that the memory is mmap'd and stays mapped (the
// contract of tensor.RegionMapper); this checks what the device requires:
// a page-aligned start, whole pages, and no more than maxBuffer bytes.
func planRegion(start uintptr, n int, lim deviceLimits) regionPlan {
	switch {
	case n <= 0:
		return regionPlan{reason: "empty region"}
	case lim.pageSize <= 0:
		return regionPlan{reason: "page size unknown"}
	case start%uintptr(lim.pageSize) != 0:
		return regionPlan{reason: fmt.Sprintf("region at %#x is not aligned to the %d-byte page", start, lim.pageSize)}
	}
	size := (n + lim.pageSize - 1) / lim.pageSize * lim.pageSize
	if lim.maxBuffer > 0 && size > lim.maxBuffer {
		return regionPlan{size: size, reason: fmt.Sprintf("region of %d bytes exceeds the device's largest buffer (%d bytes)", size, lim.maxBuffer)}
	}
	return regionPlan{size: size}
}

// planWeight decides where n weight bytes at p go: region i of regions at
// byte offset off (when they lie wholly inside it at an offset that is a
// multiple of align, the size of the element the kernels read), or, with
// i = -1, into a buffer of their own, which the device must allow.
func planWeight(p uintptr, n, align int, regions []span, lim deviceLimits) (i, off int, err error) {
	align = max(align, 1)
	for i, r := range regions {
		if p >= r.start && p+uintptr(n) <= r.end {
			off := int(p - r.start)
			if off%align == 0 {
				return i, off, nil
			}
			break // misaligned for the kernels: copy
		}
	}
	if lim.maxBuffer > 0 && n > lim.maxBuffer {
		return -1, 0, fmt.Errorf("weight of %d bytes exceeds the device's largest buffer (%d bytes)", n, lim.maxBuffer)
	}
	return -1, 0, nil
}

// checkBuffer reports whether the device can make a buffer of n bytes.
func checkBuffer(n int, lim deviceLimits) error {
	if lim.maxBuffer > 0 && n > lim.maxBuffer {
		return fmt.Errorf("buffer of %d bytes exceeds the device's largest buffer (%d bytes)", n, lim.maxBuffer)
	}
	return nil
}

// placement is a driver's record of its regions and where weights went.
type placement struct {
	lim deviceLimits
	// regions are the wrapped regions; bufs[i] wraps regions[i].
	regions []span
	bufs    []buffer
	// declined says, for each region not wrapped, why.
	declined []string
	// inRegion and copied count the weights served each way.
	inRegion, copied int
}

// addRegion records a wrapped region of n bytes at start.
func (p *placement) addRegion(start uintptr, n int, b buffer) {
	p.regions = append(p.regions, span{start, start + uintptr(n)})
	p.bufs = append(p.bufs, b)
}

// decline records why a region was not wrapped.
func (p *placement) decline(reason string) { p.declined = append(p.declined, reason) }
