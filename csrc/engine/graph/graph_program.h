// Lowers a whole GraphSpec into one Program: the graph's inputs become storage slots and views
// (bound like an eager call's tensors, so a view input at a new offset is a runtime value), every
// node is applied through its lowering rule, copy_ into an input becomes a donated write-back,
// random nodes draw from one generator key, and the graph outputs become dense results.
#pragma once

#include <string>

#include "engine/call/op_call.h"
#include "engine/graph/graph_spec.h"
#include "program/program.h"

namespace tpu::engine::graph {

// Number of nodes that draw random bits (the generator reserves that many offsets per run).
int count_random_nodes(const GraphSpec& spec);

// `inputs` binds the graph inputs (OpCall::tensors[i] is input i). Throws program::ProgramError
// or lowering::NotLowerable naming the node, its op and its source line.
program::Module assemble_graph_program(const GraphSpec& spec, const OpCall& inputs);

}  // namespace tpu::engine::graph
