// Package tensor is the leaf that the model and its backends share: element
// types, stored weights (views over the bytes of a checkpoint, usually
// mmap'd), and the Backend interface that a compute backend implements.
//
// Activations are always float32 and live in backend-owned Tensors. Weights
// keep the dtype they were stored in (F32, BF16, F16, or MLX affine-quantised
// U32); a backend converts them as it uses them and never keeps a float32 copy
// of a whole matrix. QuantizeInt8 turns a matrix into an int8 weight (I8, one
// scale per output channel) for the W8A8 product whose arithmetic int8.go
// defines; backends that run it implement Int8Backend.
//
// The interface is shaped so that a GPU backend can record a whole forward pass
// without waiting: every operation may be queued, and only Backend.Read (and
// Backend.Sync) wait for the work queued before them.
package tensor
