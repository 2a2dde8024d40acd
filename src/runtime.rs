//! The tokio runtime the core runs its tasks on: napi's own (one per
//! process, started when the addon loads). Unit tests, which run without
//! Node, get a private one.

#[cfg(not(test))]
pub fn handle() -> tokio::runtime::Handle {
    napi::bindgen_prelude::within_runtime_if_available(tokio::runtime::Handle::current)
}

#[cfg(test)]
pub fn handle() -> tokio::runtime::Handle {
    use std::sync::OnceLock;
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("test runtime")
    })
    .handle()
    .clone()
}
