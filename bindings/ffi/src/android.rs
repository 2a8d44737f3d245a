//! The Android battery meter, started from Kotlin: `dev.tern.BatteryMeterJni.install(context)`
//! (called by `TernAndroid.installBatteryMeter`) lands here with the JVM and the app's context,
//! which the SDK's JNI meter needs (`tern::energy::android`). Installed before an engine loads,
//! it is that engine's meter: energy figures are then measured, not estimated.
//!
//! Built for Android, and with the `android-battery` feature on other hosts so that the JVM
//! suite calls it against stand-in classes.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use jni::objects::{JClass, JObject};
use jni::sys::jstring;
use jni::JNIEnv;

use crate::error::TernError;

/// `BatteryMeterJni.install(context: Any): String?`: null when the meter runs, else why not.
#[no_mangle]
pub extern "system" fn Java_dev_tern_BatteryMeterJni_install<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    context: JObject<'l>,
) -> jstring {
    let result = catch_unwind(AssertUnwindSafe(|| install(&mut env, &context)))
        .unwrap_or_else(|_| Err(TernError::panicked("the battery meter")));
    match result {
        Ok(()) => std::ptr::null_mut(),
        // Should even the message fail, a Java exception is pending and Kotlin sees it.
        Err(e) => env.new_string(e.to_string()).map(|s| s.into_raw()).unwrap_or(std::ptr::null_mut()),
    }
}

fn install(env: &mut JNIEnv, context: &JObject) -> Result<(), TernError> {
    let jni_error = |e: jni::errors::Error| TernError::Energy { detail: format!("JNI: {e}") };
    if context.is_null() {
        return Err(TernError::InvalidOption { detail: "the context is null".into() });
    }
    let vm = env.get_java_vm().map_err(jni_error)?;
    let context = env.new_global_ref(context).map_err(jni_error)?;
    let meter = tern::energy::android::start_battery_meter(vm, context)?;
    tern::energy::meter::install(Arc::new(meter));
    Ok(())
}
