package android.content;

/** The sticky battery broadcast: voltage in mV, plugged (0 = on battery). */
public class Intent {
    public int getIntExtra(String name, int defaultValue) {
        switch (name) {
            case "voltage": return android.os.BatteryManager.millivolts;
            case "plugged": return android.os.BatteryManager.plugged;
            default: return defaultValue;
        }
    }
}
