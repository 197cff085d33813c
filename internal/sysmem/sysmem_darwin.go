package sysmem

import (
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
	"golang.org/x/sys/unix"
)

// total reads hw.memsize.
func total() (int64, bool) {
	n, err := unix.SysctlUint64("hw.memsize")
	if err != nil || n == 0 || n >= 1<<62 {
		return 0, false
	}
	return int64(n), true
}

// mach holds the Mach calls of libSystem that sysmem makes, loaded once.
type mach struct {
	hostSelf       func() uint32
	hostPageSize   func(host uint32, size *uintptr) int32
	hostStatistics func(host uint32, flavor int32, info *[hostVMInfo64Count]uint32, count *uint32) int32
	taskInfo       func(task uint32, flavor uint32, info *[machTaskBasicInfoCount]uint32, count *uint32) int32
	taskSelf       uint32 // mach_task_self_, the task port of this process
}

// From <mach/host_info.h> and <mach/task_info.h>.
const (
	hostVMInfo64           = 4  // HOST_VM_INFO64
	hostVMInfo64Count      = 38 // HOST_VM_INFO64_COUNT: sizeof(vm_statistics64) / 4
	machTaskBasicInfo      = 20 // MACH_TASK_BASIC_INFO
	machTaskBasicInfoCount = 12 // MACH_TASK_BASIC_INFO_COUNT: sizeof(mach_task_basic_info) / 4
)

// Indexes, in 32-bit words, of the vm_statistics64 fields read.
const (
	vmWire       = 3  // wire_count
	vmPurgeable  = 22 // purgeable_count
	vmCompressor = 32 // compressor_page_count
	vmInternal   = 35 // internal_page_count
)

var loadMach = sync.OnceValues(func() (*mach, error) {
	lib, err := purego.Dlopen("/usr/lib/libSystem.B.dylib", purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return nil, err
	}
	m := &mach{}
	purego.RegisterLibFunc(&m.hostSelf, lib, "mach_host_self")
	purego.RegisterLibFunc(&m.hostPageSize, lib, "host_page_size")
	purego.RegisterLibFunc(&m.hostStatistics, lib, "host_statistics64")
	purego.RegisterLibFunc(&m.taskInfo, lib, "task_info")
	p, err := purego.Dlsym(lib, "mach_task_self_")
	if err != nil {
		return nil, err
	}
	// p is the address of a C global, outside Go's heap.
	m.taskSelf = **(**uint32)(unsafe.Pointer(&p))
	return m, nil
})

// available is hw.memsize less the memory Activity Monitor counts as used:
// app memory (anonymous pages less purgeable ones), wired memory and the
// compressor's pages, from host_statistics64.
func available() (int64, bool) {
	phys, ok := total()
	m, err := loadMach()
	if !ok || err != nil {
		return 0, false
	}
	host := m.hostSelf()
	var page uintptr
	if m.hostPageSize(host, &page) != 0 || page == 0 {
		return 0, false
	}
	var st [hostVMInfo64Count]uint32
	count := uint32(hostVMInfo64Count)
	if m.hostStatistics(host, hostVMInfo64, &st, &count) != 0 {
		return 0, false
	}
	app := int64(st[vmInternal]) - int64(st[vmPurgeable])
	used := (max(app, 0) + int64(st[vmWire]) + int64(st[vmCompressor])) * int64(page)
	return max(phys-used, 0), true
}

// resident is task_info's MACH_TASK_BASIC_INFO resident_size.
func resident() (int64, bool) {
	m, err := loadMach()
	if err != nil {
		return 0, false
	}
	var info [machTaskBasicInfoCount]uint32
	count := uint32(machTaskBasicInfoCount)
	if m.taskInfo(m.taskSelf, machTaskBasicInfo, &info, &count) != 0 {
		return 0, false
	}
	// resident_size is the mach_vm_size_t after virtual_size: words 2 and
	// 3, little-endian.
	return int64(info[2]) | int64(info[3])<<32, true
}
