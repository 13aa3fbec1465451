go test fuzz v1
[]byte("module @jit_f attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {\n  func.func public @main(%arg0: tensor<i32> {mhlo.layout_mode = \"default\"}, %arg1: tensor<i32> {mhlo.layout_mode = \"default\"}) -> (tensor<i32> {jax.result_info = \"\", mhlo.layout_mode = \"default\"}) {\n    %c = stablehlo.constant dense<2> : tensor<i32>\n    %0 = stablehlo.multiply %c, %arg0 : tensor<i32>\n    %1 = stablehlo.add %0, %arg1 : tensor<i32>\n    return %1 : tensor<i32>\n  }\n}\n")
bool(false)
