fn main() -> Result<(), Box<dyn std::error::Error>> {
    tonic_prost_build::compile_protos("proto/upstream.proto")?;
    tonic_prost_build::compile_protos("proto/message_center.proto")?;
    println!("cargo:rerun-if-changed=proto");
    Ok(())
}
