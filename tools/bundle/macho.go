package bundle

import (
	"bytes"
	"debug/macho"
	"encoding/binary"
	"fmt"
	"slices"
)

// fatMagic is the big-endian magic number of a universal (fat) Mach-O file.
const fatMagic = 0xcafebabe

// fatHeaderSize and fatArchSize are the sizes of struct fat_header and
// struct fat_arch (all fields 32-bit, big-endian).
const (
	fatHeaderSize = 8
	fatArchSize   = 20
)

// sliceAlign returns the log2 alignment of a slice of the given CPU inside a
// universal file: the page size the kernel maps it with (16 KiB on arm64,
// 4 KiB on x86_64), as lipo chooses.
func sliceAlign(cpu macho.Cpu) uint32 {
	if cpu == macho.CpuArm64 {
		return 14
	}
	return 12
}

// Universal merges thin 64-bit Mach-O executables, one per architecture, into
// one universal (fat) Mach-O file: a fat header and one fat_arch record per
// slice, each slice copied unchanged at an offset aligned to its page size.
// Slices are ordered by CPU type (x86_64 before arm64, as Apple's tools do).
func Universal(thin ...[]byte) ([]byte, error) {
	if len(thin) == 0 {
		return nil, fmt.Errorf("universal: no slices given")
	}
	type slice struct {
		cpu    macho.Cpu
		subcpu uint32
		align  uint32
		data   []byte
	}
	var ss []slice
	for i, b := range thin {
		f, err := macho.NewFile(bytes.NewReader(b))
		if err != nil {
			return nil, fmt.Errorf("universal: slice %d is not a thin Mach-O file: %w", i, err)
		}
		if f.Magic != macho.Magic64 {
			return nil, fmt.Errorf("universal: slice %d: magic %#x, want a 64-bit Mach-O (%#x)", i, f.Magic, macho.Magic64)
		}
		for _, s := range ss {
			if s.cpu == f.Cpu {
				return nil, fmt.Errorf("universal: slice %d repeats architecture %v", i, f.Cpu)
			}
		}
		ss = append(ss, slice{cpu: f.Cpu, subcpu: f.SubCpu, align: sliceAlign(f.Cpu), data: b})
	}
	slices.SortFunc(ss, func(a, b slice) int { return int(a.cpu) - int(b.cpu) })

	header := make([]byte, fatHeaderSize+fatArchSize*len(ss))
	binary.BigEndian.PutUint32(header[0:], fatMagic)
	binary.BigEndian.PutUint32(header[4:], uint32(len(ss)))
	offset := uint64(len(header))
	offsets := make([]uint64, len(ss))
	for i, s := range ss {
		a := uint64(1) << s.align
		offset = (offset + a - 1) &^ (a - 1)
		offsets[i] = offset
		offset += uint64(len(s.data))
		if offset > 1<<32-1 {
			return nil, fmt.Errorf("universal: slices exceed 4 GiB, which 32-bit fat headers cannot address")
		}
		rec := header[fatHeaderSize+fatArchSize*i:]
		binary.BigEndian.PutUint32(rec[0:], uint32(s.cpu))
		binary.BigEndian.PutUint32(rec[4:], s.subcpu)
		binary.BigEndian.PutUint32(rec[8:], uint32(offsets[i]))
		binary.BigEndian.PutUint32(rec[12:], uint32(len(s.data)))
		binary.BigEndian.PutUint32(rec[16:], s.align)
	}
	out := make([]byte, offset)
	copy(out, header)
	for i, s := range ss {
		copy(out[offsets[i]:], s.data)
	}
	return out, nil
}
