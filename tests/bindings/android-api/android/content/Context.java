// Compile-time signatures of the Android API surface that the UniFFI-generated Kotlin (Android
// flavour) and bindings/kotlin use, for the Kotlin suite's Android-flavour compile check
// (tests/bindings/kotlin-tools.sh). No behaviour: bodies throw as android.jar's own stubs do, and
// nothing compiled against them is run. Only the type is used (installBatteryMeter's parameter).
package android.content;

public abstract class Context {
    public Context() {
        throw new RuntimeException("Stub!");
    }
}
